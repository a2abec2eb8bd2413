# An upstream repository built the same way each time (fixed identities and dates), a
# directory that is not a repository, and a file where a target would go.
set -e
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME='Up Stream' GIT_AUTHOR_EMAIL=up@example.com
export GIT_COMMITTER_NAME='Up Stream' GIT_COMMITTER_EMAIL=up@example.com
export GIT_AUTHOR_DATE=2024-01-02T03:04:05Z GIT_COMMITTER_DATE=2024-01-02T03:04:05Z
up="$1/up"
mkdir -p "$up"
cd "$up"
git -c init.defaultBranch=main init -q
printf 'one\n' > a.txt
git add a.txt
git commit -q -m first
git tag v1
printf 'one\ntwo\n' > a.txt
git commit -q -am second
git tag -a -m 'version 2' v2
git branch dev HEAD~1
mkdir -p "$1/notrepo"
touch "$1/notrepo/stuff" "$1/afile"
mkdir -p "$1/forced"
touch "$1/forced/old"
