# The machine's locale files kept once (under /var/tmp/brine-test-locale) and put back before
# each run; en_US.UTF-8 removed from the compiled locales unless the machine had it.
keep=/var/tmp/brine-test-locale
if [ ! -d "$keep" ]; then
  mkdir -p "$keep"
  for f in /etc/default/locale /etc/locale.gen; do [ -e "$f" ] && cp -p "$f" "$keep/"; done
  locale -a > "$keep/compiled"
fi
for f in locale locale.gen; do [ -e "$keep/$f" ] || continue; done
[ -e "$keep/locale" ] && cp -p "$keep/locale" /etc/default/locale
[ -e "$keep/locale.gen" ] && cp -p "$keep/locale.gen" /etc/locale.gen
if ! grep -qx 'en_US.utf8' "$keep/compiled"; then
  localedef --delete-from-archive en_US.utf8 >/dev/null 2>&1 || true
fi
