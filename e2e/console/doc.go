// Package console tests the web console (package console) in a real
// headless Chromium (Debian's chromium, driven by chromedp) against a real
// `sandlot serve`. It is a module of its own so chromedp stays out of
// sandlot's module graph.
package console
