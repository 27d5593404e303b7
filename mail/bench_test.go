package mail

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func BenchmarkBox(b *testing.B) {
	box := mustBox(b, testSecret)
	m := sampleMessage(PasswordReset)
	id := NewID()
	sealed, _ := box.Seal(id, m)
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := box.Seal(id, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, err := box.Open(id, sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWorker measures the worker's delivery throughput (msgs/s) and
// the latency from Queued (commit + kick) to the receiver having the
// message (latency-µs), per sender, over the in-memory queue: the worker's
// and the senders' own cost, not a store's. "noop" is the baseline.
// Receivers signal each arrival on a channel, so no polling is measured.
func BenchmarkWorker(b *testing.B) {
	arrived := make(chan struct{}, 1<<16)
	signal := func() { arrived <- struct{}{} }
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		signal()
	}))
	defer hook.Close()
	smtpSrv := &smtpServer{onData: signal}
	smtpSrv.start(b, plainServer, testCert{})

	senders := []struct {
		name   string
		sender func() Sender
	}{
		{"noop", func() Sender {
			return sendFunc(func(context.Context, Message, string) error { signal(); return nil })
		}},
		{"webhook", func() Sender {
			s, err := NewWebhook(WebhookOptions{URL: hook.URL, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"smtp", func() Sender {
			s, err := NewSMTP(SMTPOptions{Addr: smtpSrv.addr, TLS: TLSNone, From: "a@acme.example"})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	box := mustBox(b, testSecret)
	start := func(b *testing.B, s Sender, delivery string, batch int) (*memQueue, *Worker) {
		q := newMemQueue()
		w, err := NewWorker(WorkerOptions{Queue: q, Box: box, Sender: s, Delivery: delivery, Batch: batch, PollInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		return q, w
	}
	for _, s := range senders {
		b.Run(s.name+"/throughput", func(b *testing.B) {
			q, w := start(b, s.sender(), s.name, 50)
			for range b.N {
				q.add(b, box, sampleMessage(PasswordReset), time.Now())
			}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			b.ResetTimer()
			t0 := time.Now()
			go w.Run(ctx)
			for range b.N {
				<-arrived
			}
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "msgs/s")
		})
		b.Run(s.name+"/latency", func(b *testing.B) {
			q, w := start(b, s.sender(), s.name, 10)
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			go w.Run(ctx)
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				q.add(b, box, sampleMessage(PasswordReset), t0)
				w.Queued(PasswordReset)
				<-arrived
				total += time.Since(t0)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N), "latency-µs")
		})
	}
}
