package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"
)

// cmdRolesGrant gives a user a role. Admin routes query user_role on every
// request, so the grant counts from the next one; JWTs carry no roles.
func cmdRolesGrant(ctx context.Context, e *cliEnv, args []string) error {
	email, role := normEmail(args[0]), args[1]
	if err := checkRole(role); err != nil {
		return err
	}
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	added, err := a.db.GrantRoleByEmail(ctx, email, role, time.Now())
	if err != nil {
		return notFound(err, email)
	}
	if added {
		fmt.Fprintf(e.stdout, "granted role %s to %s: admin routes allow it from the next request\n", role, email)
	} else {
		fmt.Fprintf(e.stdout, "%s already has role %s: nothing changed\n", email, role)
	}
	for _, r := range a.cfg.Routes.Admin {
		if slices.Contains(r.Roles, role) {
			return nil
		}
	}
	fmt.Fprintf(e.stdout, "note: no prefix in routes.admin of %s accepts role %s\n", e.configPath, role)
	return nil
}

// cmdRolesRevoke takes a role away, from the next admin request on.
func cmdRolesRevoke(ctx context.Context, e *cliEnv, args []string) error {
	email, role := normEmail(args[0]), args[1]
	if err := checkRole(role); err != nil {
		return err
	}
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	removed, err := a.db.RevokeRoleByEmail(ctx, email, role)
	if err != nil {
		return notFound(err, email)
	}
	if removed {
		fmt.Fprintf(e.stdout, "revoked role %s from %s: admin routes refuse it from the next request\n", role, email)
	} else {
		fmt.Fprintf(e.stdout, "%s did not have role %s: nothing changed\n", email, role)
	}
	return nil
}

// cmdRolesList prints the granted roles, of everyone or of one user.
func cmdRolesList(ctx context.Context, e *cliEnv, args []string) error {
	var email string
	if len(args) == 1 {
		email = normEmail(args[0])
	}
	a, err := openAdmin(ctx, e, false)
	if err != nil {
		return err
	}
	defer a.Close()
	grants, err := a.db.RoleGrants(ctx, email)
	if err != nil {
		return notFound(err, email)
	}
	if len(grants) == 0 {
		if email != "" {
			fmt.Fprintf(e.stdout, "%s has no roles\n", email)
		} else {
			fmt.Fprintln(e.stdout, "no roles granted")
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EMAIL\tROLE\tGRANTED")
	for _, g := range grants {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(g.Email), g.Role, timeText(g.CreatedAt))
	}
	return tw.Flush()
}
