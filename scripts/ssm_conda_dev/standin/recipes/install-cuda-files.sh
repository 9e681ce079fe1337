# The files of one stand-in CUDA package (standin/cuda.py): COPY holds "from=>to" pairs, `from` under
# the wheel's nvidia/<dir>/ root (a trailing /. copies a folder's contents), `to` under $PREFIX;
# LINKS holds "link->target" pairs; RECIPE_FILES "file=>to" pairs of files beside the recipe.
set -euo pipefail
if [ -n "${WHEEL:-}" ]; then
  unzip -q "$WHEEL" 'nvidia/*' -d wheel
  root=$(echo wheel/nvidia/*)
fi
for pair in ${COPY:-}; do
  from="$root/${pair%%=>*}"; to="$PREFIX/${pair#*=>}"
  if [[ "$from" == */. ]]; then mkdir -p "$to"; else mkdir -p "$(dirname "$to")"; fi
  cp -a "$from" "$to"
done
for pair in ${RECIPE_FILES:-}; do
  to="$PREFIX/${pair#*=>}"
  mkdir -p "$(dirname "$to")"
  cp "$RECIPE_DIR/${pair%%=>*}" "$to"
done
for pair in ${LINKS:-}; do
  link="$PREFIX/${pair%%->*}"
  mkdir -p "$(dirname "$link")"
  ln -s "${pair#*->}" "$link"
done
