# A link group of the test's own (brine-test-alt: its link and alternatives in the case's
# directory) made anew with one alternative, a, at priority 10.
update-alternatives --remove-all brine-test-alt >/dev/null 2>&1 || true
mkdir -p "$1/bin"
for alt in a b; do printf '#!/bin/sh\necho %s\n' "$alt" > "$1/$alt"; chmod +x "$1/$alt"; done
update-alternatives --install "$1/bin/brine-test-alt" brine-test-alt "$1/a" 10 >/dev/null
