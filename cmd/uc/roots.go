package main

// uc calls webhooks over HTTPS. Its image holds the binary alone (no
// base image, no CA bundle): where the system has no CA certificates,
// crypto/x509 falls back on the Mozilla roots this package embeds.
import _ "golang.org/x/crypto/x509roots/fallback"
