// Package browser drives the admin page (package admin) in a real
// headless Chromium, through chromedp. It is a module of its own so that
// the browser's protocol library stays out of idem's go.mod; it holds
// tests only.
package browser
