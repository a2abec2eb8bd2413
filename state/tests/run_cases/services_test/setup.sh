# The same machine state as the services case.
exec sh "$(dirname "$0")/../services/setup.sh" "$@"
