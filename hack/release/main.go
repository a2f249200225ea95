// Command release builds a release of uc into a directory (make release:
// dist/): the uc binaries with SBOMs and SHA256SUMS, the multi-arch OCI
// image as an OCI layout tarball and its digest, the packaged Helm chart
// and the packed JavaScript SDK. It needs the Go toolchain, git and npm;
// no container engine. See docs/releasing.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"

	"universalcontroller.dev/uc/internal/release"
)

func main() {
	out := flag.String("out", "dist", "the directory to write the release to; it must be empty or absent")
	root := flag.String("root", ".", "the repository's root")
	var platforms []string
	for _, p := range release.Platforms {
		platforms = append(platforms, p.String())
	}
	platformList := flag.String("platforms", strings.Join(platforms, ","), "the platforms to build uc for, os/arch separated by commas; the image has the linux ones")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "release takes no arguments, got %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	o := release.Options{Root: *root, Out: *out, Log: slog.Default()}
	for s := range strings.SplitSeq(*platformList, ",") {
		p, err := release.ParsePlatform(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		o.Platforms = append(o.Platforms, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := release.Build(ctx, o); err != nil {
		slog.Error("release failed", "err", err)
		os.Exit(1)
	}
}
