package release

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image: the uc binary alone, /uc, run as an unprivileged user. It
// has no base image (no shell, no libc: uc is static) and no CA bundle:
// uc embeds fallback roots (cmd/uc/roots.go).
const (
	Entrypoint = "/uc"
	User       = "65532:65532" // distroless' nonroot, as deploy/uc's runAsUser
	SourceURL  = "https://github.com/universalcontroller/uc"
)

// Labels are the image's OCI labels, also the index's annotations.
func Labels(src Source) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "uc",
		"org.opencontainers.image.description": "UniversalController: Metacontroller-style Kubernetes controllers on NATS JetStream",
		"org.opencontainers.image.version":     src.Version,
		"org.opencontainers.image.revision":    src.Commit,
		"org.opencontainers.image.source":      SourceURL,
		"org.opencontainers.image.created":     src.Time.Format(time.RFC3339),
	}
}

// Image is the image index of the Linux binaries (their paths by
// platform): one image per platform, each a single layer holding the
// binary as /uc. Everything in it is from the binaries and src, time
// included (the commit's): the same binaries make the same digest.
func Image(binaries map[Platform]string, src Source) (v1.ImageIndex, error) {
	if len(binaries) == 0 {
		return nil, errNoLinux
	}
	created := v1.Time{Time: src.Time}
	labels := Labels(src)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range slices.SortedFunc(maps.Keys(binaries), func(a, b Platform) int { return cmp.Compare(a.String(), b.String()) }) {
		layer, err := binaryLayer(binaries[p], src.Time)
		if err != nil {
			return nil, err
		}
		platform := v1.Platform{OS: p.OS, Architecture: p.Arch}
		if p.Arch == "arm64" {
			platform.Variant = "v8"
		}
		img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
			Architecture: platform.Architecture,
			OS:           platform.OS,
			Variant:      platform.Variant,
			Created:      created,
			Config:       v1.Config{Entrypoint: []string{Entrypoint}, User: User, WorkingDir: "/", Labels: labels},
			RootFS:       v1.RootFS{Type: "layers"},
		})
		if err != nil {
			return nil, fmt.Errorf("image config for %s: %w", p, err)
		}
		img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: created, CreatedBy: "hack/release: uc " + src.Version + " for " + p.String() + " as " + Entrypoint},
		})
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

// binaryLayer is a layer holding the file at path as /uc, executable by
// all, owned by root, modified at t.
func binaryLayer(path string, t time.Time) (v1.Layer, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     Entrypoint[1:],
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  t,
		Format:   tar.FormatPAX,
	}); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return layer, nil
}

// WriteLayout writes idx as an OCI image layout in a tar archive at path
// (what crane push, after tar -x, and skopeo's oci-archive: take), its
// reference name the version, and returns idx's digest. The archive's
// entries are in lexical order with src's time: the same index makes the
// same archive.
func WriteLayout(idx v1.ImageIndex, src Source, path string) (string, error) {
	digest, err := idx.Digest()
	if err != nil {
		return "", fmt.Errorf("image digest: %w", err)
	}
	dir, err := os.MkdirTemp("", "uc-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("OCI layout: %w", err)
	}
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": src.Version})); err != nil {
		return "", fmt.Errorf("OCI layout: %w", err)
	}
	if err := tarDir(dir, path, src.Time); err != nil {
		return "", fmt.Errorf("OCI layout archive: %w", err)
	}
	return digest.String(), nil
}

// tarDir writes the files under dir to a tar archive at path, in lexical
// order, with modification time t and no owner.
func tarDir(dir, path string, t time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		name, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(name), ModTime: t, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h.Size = int64(len(b))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
