package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// envAnnotation marks a flag that can be set by an environment variable, and
// names it.
const envAnnotation = "uc-env"

// envName is the environment variable of a flag: --nats-url is UC_NATS_URL.
func envName(flag string) string {
	return "UC_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv gives every flag of fs its UC_* variable, named in its help: the
// one its envAnnotation names already, or envName's.
func bindEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		name := envName(f.Name)
		if set := f.Annotations[envAnnotation]; len(set) == 1 {
			name = set[0]
		}
		f.Usage += " [$" + name + "]"
		if err := fs.SetAnnotation(f.Name, envAnnotation, []string{name}); err != nil {
			panic(err) // f is in fs
		}
	})
}

// setFromEnv sets each flag of fs that the command line did not set from its
// variable, when that is set.
func setFromEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if err != nil || f.Changed || len(env) == 0 {
			return
		}
		if v, ok := os.LookupEnv(env[0]); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env[0], e)
			}
		}
	})
	return err
}
