#!/usr/bin/env bash
# The system packages the book's PDF and browser tests use, installed with
# apt-get when missing (as root on Debian/Ubuntu; elsewhere it says what to
# install and goes on): headless Chromium (tests/test_browser.py, the PDF),
# a CJK font (the Chinese pages and PDF), and poppler's pdftotext/pdffonts
# (tests/test_pdf.py). Without them the browser and PDF tests skip and say why.
set -uo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
[ -n "$(fc-list :lang=zh 2>/dev/null || true)" ] || need+=(fonts-noto-cjk)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null; } \
    || echo "warning: could not install ${need[*]}; the browser and PDF steps may skip or fail" >&2
else
  echo "note: install ${need[*]} (Debian/Ubuntu package names) for the PDF and the browser tests" >&2
fi
exit 0
