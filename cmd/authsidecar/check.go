package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/authsidecar/authsidecar/sidecar"
)

// cmdCheck prints sidecar.Check's findings, one a line, and a summary.
func cmdCheck(ctx context.Context, e *cliEnv, args []string) error {
	if err := noArgs("check", args); err != nil {
		return err
	}
	r := &checkReport{w: e.stdout}
	sidecar.Check(ctx, sidecar.CheckOptions{ConfigPath: e.configPath, Getenv: e.getenv, Online: e.online}, r)
	return r.result()
}

// checkReport writes check's lines: "ok", "WARN" (serve would run, but
// look), "skip" (not checked, and why) and "FAIL", one problem a line,
// then a summary.
type checkReport struct {
	w        io.Writer
	problems []error
}

func (r *checkReport) line(tag, format string, args ...any) {
	fmt.Fprintf(r.w, "%-6s%s\n", tag, fmt.Sprintf(format, args...))
}

func (r *checkReport) OK(format string, args ...any)   { r.line("ok", format, args...) }
func (r *checkReport) Warn(format string, args ...any) { r.line("WARN", format, args...) }
func (r *checkReport) Skip(format string, args ...any) { r.line("skip", format, args...) }

// Fail reports err, one line for each error it joins (config.Load joins
// one per problem in the file).
func (r *checkReport) Fail(err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			r.Fail(e)
		}
		return
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		r.line("FAIL", "%s", l)
	}
	r.problems = append(r.problems, err)
}

// result ends the report: "all checks passed", or the number of problems
// and an error that main does not print again.
func (r *checkReport) result() error {
	if len(r.problems) == 0 {
		fmt.Fprintln(r.w, "all checks passed")
		return nil
	}
	fmt.Fprintf(r.w, "%s found\n", plural(len(r.problems), "problem"))
	return checkFailed(r.problems)
}

// checkFailed is check's error: every problem, already printed.
type checkFailed []error

func (c checkFailed) Error() string        { return errors.Join(c...).Error() }
func (c checkFailed) Unwrap() []error      { return c }
func (c checkFailed) Is(target error) bool { return target == errReported }
