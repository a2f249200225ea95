// Package natsauth is uc's least privilege on NATS: one user per role
// (watcher, dispatcher, applier), one per controller's hook workers and the
// users of uc's inspector and operator commands, the subjects each may
// publish and subscribe to, the inbox prefix each uses, and a nats-server
// configuration that declares them (Config). A user may do exactly what
// its internal/topology Role does (permissions.go).
//
// JetStream is driven through subjects ($JS.API.*, $JS.ACK.*, $KV.*), so
// subject permissions decide which streams, consumers and buckets a user
// may use. A NATS wildcard matches whole tokens only: "hook_foo_*" is a
// literal token, not a pattern, so the hooks of a controller are listed one
// by one. Each user receives its responses (JetStream API answers, pull
// deliveries, PubAcks) on its own inbox prefix, and may subscribe to
// nothing else of the kind, so no user can read what is delivered to
// another.
package natsauth

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// Roles of uc that connect to NATS, and the user each connects as.
const (
	Watcher    = "watcher"
	Dispatcher = "dispatcher"
	Applier    = "applier"
)

// Roles lists the roles in the order Config declares them.
var Roles = []string{Watcher, Dispatcher, Applier}

// RoleUser is the NATS user of a uc role: uc-watcher, uc-dispatcher,
// uc-applier.
func RoleUser(role string) string { return "uc-" + role }

// HookUser is the NATS user of a controller's hook workers.
func HookUser(controller string) string { return "hook-" + controller }

// RoleInbox is the inbox prefix of a uc process running roles (the command
// name: watcher, dispatcher, applier, or run for all of them).
func RoleInbox(command string) string { return "_INBOX.uc_" + command }

// PasswordVariable is the variable the configuration reads a user's
// password from: UC_NATS_PASSWORD_ and the user name in upper case, every
// character other than a letter or digit an underscore
// (hook-foo.example.com: UC_NATS_PASSWORD_HOOK_FOO_EXAMPLE_COM).
func PasswordVariable(user string) string {
	return "UC_NATS_PASSWORD_" + strings.ToUpper(nonAlnum.ReplaceAllString(user, "_"))
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

// User is one NATS user and what it may do.
type User struct {
	Name      string
	About     string // one line: who connects as it
	Publish   []string
	Subscribe []string
	// Responses lets the user answer the requests it receives, on their
	// reply subjects only (nats-server's allow_responses).
	Responses bool
}

// HookWorker is the user of one controller's hook workers: it pulls the
// controller's requests from the hooks' consumers and publishes replies and
// dead letters of that controller only. It cannot create, change or delete
// streams or consumers, nor read another controller's requests.
func HookWorker(controller string) User {
	return userOf(HookUser(controller), bus.HookInbox(controller), topology.HookWorkers(controller))
}

// Role is the user of a uc role. partitions is the installation's
// --partitions: the applier, and the watcher when sharded, may use the
// consumers of those partitions only.
func Role(role string, partitions int) (User, error) {
	var r topology.Role
	switch role {
	case Dispatcher:
		r = topology.Dispatcher()
	case Watcher, Applier:
		if partitions < 1 {
			return User{}, fmt.Errorf("partitions must be at least 1, not %d", partitions)
		}
		r = topology.Applier(partitions)
		if role == Watcher {
			r = topology.EitherWatcher(partitions)
		}
	default:
		return User{}, fmt.Errorf("unknown role %q", role)
	}
	return userOf(RoleUser(role), RoleInbox(role), r), nil
}

// The users of uc's commands that look into the pipeline (Inspector) and
// steer it (Operator), and the inbox prefix both use.
const (
	InspectorUser = "uc-inspector"
	OperatorUser  = "uc-operator"
	// CLIInbox is the inbox prefix of uc trace, uc dlq and uc resync. The
	// two users share it: the operator may read all that the inspector
	// may, so neither reads more through the other's responses.
	CLIInbox = "_INBOX.uc_cli"
)

// Inspector is the user of uc trace, uc dlq ls and uc dlq show: it reads
// the streams' messages and state, the consumers', the fences and the
// partition holds, and changes nothing.
func Inspector() User { return userOf(InspectorUser, CLIInbox, topology.Inspector()) }

// Operator is the user of uc dlq replay and uc resync, and of everything
// the Inspector does: it publishes requests again and deletes the dead
// letters it replayed, and asks the watcher for syncs.
func Operator() User { return userOf(OperatorUser, CLIInbox, topology.Operator()) }

// Users are the users of the roles and of the hook workers of each
// controller. Two controllers whose users would read the same password
// variable are an error.
func Users(partitions int, controllers ...string) ([]User, error) {
	var users []User
	for _, r := range Roles {
		u, err := Role(r, partitions)
		if err != nil {
			return nil, err
		}
		users = append(users, u)
	}
	seen := map[string]string{}
	for _, c := range controllers {
		if c == "" {
			continue
		}
		u := HookWorker(c)
		v := PasswordVariable(u.Name)
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("controllers %q and %q would share the password variable %s", other, c, v)
		}
		seen[v] = c
		users = append(users, u)
	}
	return users, nil
}

// Account is the NATS account all of uc's users are in: the streams and
// consumers live there.
const Account = "UC"

// Config is a nats-server configuration block declaring the account UC,
// with JetStream, and users: include it in the server's configuration.
// Each password is read from its variable (PasswordVariable): defined
// before the include, or in the server's environment.
func Config(users []User) string {
	var b strings.Builder
	b.WriteString("# uc's NATS users, one per role and one per controller's hook workers, each\n" +
		"# with the subjects it may use. Made by `uc nats-config`: run it again with\n" +
		"# --controllers to add controllers' hook workers. Each password is the\n" +
		"# variable named after its user: define it before including this file, or\n" +
		"# in nats-server's environment.\n")
	fmt.Fprintf(&b, "accounts {\n  %s {\n    jetstream: enabled\n    users: [\n", Account)
	for _, u := range users {
		fmt.Fprintf(&b, "      # %s\n", u.About)
		fmt.Fprintf(&b, "      {\n        user: %q\n        password: $%s\n        permissions: {\n", u.Name, PasswordVariable(u.Name))
		writeList(&b, "publish", u.Publish)
		writeList(&b, "subscribe", u.Subscribe)
		if u.Responses {
			b.WriteString("          allow_responses: true\n")
		}
		b.WriteString("        }\n      }\n")
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String()
}

func writeList(b *strings.Builder, name string, subjects []string) {
	s := append([]string(nil), subjects...)
	sort.Strings(s)
	fmt.Fprintf(b, "          %s: {allow: [\n", name)
	for _, subj := range s {
		fmt.Fprintf(b, "            %q\n", subj)
	}
	b.WriteString("          ]}\n")
}
