package userimport

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// csvSource reads CSV with a header row naming the fields (in any order
// and case; the roles cell is "admin;ops").
type csvSource struct {
	in *bounded
	cr *csv.Reader
	// cols holds the field of each column.
	cols []int
	// last is the line of the last record read.
	last int
}

func newCSV(r io.Reader) (*csvSource, error) {
	s := &csvSource{in: &bounded{r: r, limit: MaxLineBytes + readAhead}}
	s.cr = csv.NewReader(s.in)
	s.cr.ReuseRecord = true
	header, err := s.cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("CSV: no header row: the first line names the columns (id, email, name, ...)")
	}
	if err != nil {
		return nil, fmt.Errorf("CSV header: %w", err)
	}
	seen := map[int]bool{}
	for i, name := range header {
		if i == 0 {
			name = strings.TrimPrefix(name, bom)
		}
		f := fieldIndex(strings.ToLower(strings.TrimSpace(name)))
		if f < 0 {
			return nil, fmt.Errorf("CSV header: unknown column %s (the columns are %s)", quote(name), strings.Join(fieldNames[:], ", "))
		}
		if seen[f] {
			return nil, fmt.Errorf("CSV header: column %s twice", fieldNames[f])
		}
		seen[f] = true
		s.cols = append(s.cols, f)
	}
	if !seen[fEmail] {
		return nil, errors.New("CSV header: no email column")
	}
	s.last = 1
	s.mark()
	return s, nil
}

func (s *csvSource) offset() int64 { return s.cr.InputOffset() }

func (s *csvSource) next(l *rawLine) error {
	rec, err := s.cr.Read()
	s.mark()
	var pe *csv.ParseError
	switch {
	case errors.Is(err, errLineTooLong):
		return fmt.Errorf("the record after line %d is longer than %d KiB (a quote never closed?): reading stops there", s.last, MaxLineBytes>>10)
	case errors.As(err, &pe):
		// The reader went on to the next line: so does the import.
		s.last = pe.StartLine
		return refuse(pe.StartLine, "CSV: %v", pe.Err)
	case err != nil:
		return err
	}
	line, _ := s.cr.FieldPos(0)
	s.last = line
	l.reset(line)
	for i, f := range s.cols {
		l.set(f, rec[i])
	}
	return nil
}

// mark starts the bound of the next record where the reader stands.
func (s *csvSource) mark() {
	s.in.limit = s.cr.InputOffset() + MaxLineBytes + readAhead
}

// readAhead is what csv.Reader's bufio.Reader may have read beyond the
// record it returned.
const readAhead = 4096

// bounded fails a read that would take it past limit bytes: a record with
// no end in sight.
type bounded struct {
	r     io.Reader
	n     int64
	limit int64
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.n >= b.limit {
		return 0, errLineTooLong
	}
	if room := b.limit - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}
