package mail

import "context"

// Sender delivers one message. id is the outbox row id: senders derive
// everything that must stay the same across retries of one message from it
// (the SMTP Message-ID, the webhook-id), so a receiver can recognise a
// re-send after a crash between delivery and acknowledgement.
//
// Send must return within ctx's deadline and return nil only when the
// receiving end has accepted the message.
type Sender interface {
	Send(ctx context.Context, m Message, id string) error
}
