package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestLogSender(t *testing.T) {
	var buf bytes.Buffer
	s, err := NewLogSender(slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m := sampleMessage(PasswordReset)
	id := NewID()
	if err := s.Send(context.Background(), m, id); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	want := map[string]any{"level": "INFO", "msg": "mail", "type": "password_reset", "to": m.To, "url": m.URL, "id": id}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s: got %v, want %v", k, line[k], v)
		}
	}
	if _, err := NewLogSender(nil); err == nil {
		t.Error("NewLogSender(nil): got nil error")
	}
}
