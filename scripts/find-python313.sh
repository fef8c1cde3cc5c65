#!/usr/bin/env bash
# Prints the path of a working Python 3.13 (a pyenv shim that cannot run it does not count).
for candidate in "$(command -v python3.13)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13 /usr/local/bin/python3.13 /usr/bin/python3.13; do
  if [ -n "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
    echo "$candidate"
    exit 0
  fi
done
exit 1
