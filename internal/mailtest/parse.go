package mailtest

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	netmail "net/mail"
	"strings"
)

// Mail is a received message taken apart with net/mail and
// mime/multipart, independently of the library that built it.
type Mail struct {
	Header    netmail.Header
	From, To  *netmail.Address
	Subject   string // decoded (RFC 2047)
	MessageID string // as in the header, angle brackets included
	// ContentType is the top-level media type, e.g. multipart/alternative.
	ContentType string
	// Parts are the media types of a multipart/alternative's parts, in
	// their order; nil for a single-part message.
	Parts []string
	// Text and HTML are the text/plain and text/html parts, transfer
	// encoding undone and line ends turned into "\n".
	Text, HTML string
}

// ParseMail takes a message apart; the error says what does not parse.
func ParseMail(data []byte) (Mail, error) {
	var p Mail
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return p, fmt.Errorf("message: %w", err)
	}
	p.Header = msg.Header
	if p.From, err = netmail.ParseAddress(msg.Header.Get("From")); err != nil {
		return p, fmt.Errorf("From %q: %w", msg.Header.Get("From"), err)
	}
	if p.To, err = netmail.ParseAddress(msg.Header.Get("To")); err != nil {
		return p, fmt.Errorf("To %q: %w", msg.Header.Get("To"), err)
	}
	if p.Subject, err = new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return p, fmt.Errorf("Subject: %w", err)
	}
	p.MessageID = msg.Header.Get("Message-Id")
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return p, fmt.Errorf("Content-Type %q: %w", msg.Header.Get("Content-Type"), err)
	}
	p.ContentType = mt
	if mt != "multipart/alternative" {
		return p, nil
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // undoes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			return p, fmt.Errorf("multipart: %w", err)
		}
		pt, _, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if err != nil {
			return p, fmt.Errorf("part Content-Type: %w", err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			return p, fmt.Errorf("part %s: %w", pt, err)
		}
		p.Parts = append(p.Parts, pt)
		switch pt {
		case "text/plain":
			p.Text = strings.ReplaceAll(string(body), "\r\n", "\n")
		case "text/html":
			p.HTML = strings.ReplaceAll(string(body), "\r\n", "\n")
		}
	}
	return p, nil
}
