# The same machine state as the pkgs case.
exec sh "$(dirname "$0")/../pkgs/setup.sh" "$@"
