#!/usr/bin/env bash
# Assembles a Node.js base image FROM scratch out of this machine's own files: the node binary
# and the shared libraries it and the native addons under the given node_modules need. For
# machines that cannot pull images (no registry access); everywhere else use a real base such
# as node:20-bookworm-slim. The result only runs addons built on this machine (same glibc).
#
#   docker/local-base-image.sh [-t TAG] [-b podman|docker|buildah] [NODE_MODULES_DIR...]
#   bundle containerize quickstart:latest --base-image localhost/modelbundle-node:20
set -euo pipefail

tag="localhost/modelbundle-node:$(node -p 'process.versions.node.split(".")[0]')"
backend=""
while getopts "t:b:" opt; do
  case "$opt" in
    t) tag="$OPTARG" ;;
    b) backend="$OPTARG" ;;
    *) echo "usage: $0 [-t TAG] [-b podman|docker|buildah] [NODE_MODULES_DIR...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ -z "$backend" ]; then
  for b in podman docker buildah; do
    if command -v "$b" >/dev/null 2>&1; then backend="$b"; break; fi
  done
fi
[ -n "$backend" ] || { echo "error: no podman, docker or buildah on PATH" >&2; exit 1; }

node_bin="$(command -v node)"
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/tmp" "$ctx/rootfs/etc"
chmod 1777 "$ctx/rootfs/tmp"
cp "$node_bin" "$ctx/rootfs/usr/local/bin/node"

# Libraries: what ldd lists for node and for every native addon and library in the given trees.
targets=("$node_bin")
for dir in "$@"; do
  while IFS= read -r -d '' f; do targets+=("$f"); done < <(find "$dir" \( -name '*.node' -o -name '*.so' -o -name '*.so.*' \) -type f -print0)
done
for t in "${targets[@]}"; do
  ldd "$t" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }' || true
done | sort -u | while read -r lib; do
  [ -e "$lib" ] || continue
  mkdir -p "$ctx/rootfs$(dirname "$lib")"
  cp -L "$lib" "$ctx/rootfs$lib"
done
# The loader also lives under /lib64 on x86-64 Debian.
if [ -e /lib64/ld-linux-x86-64.so.2 ]; then mkdir -p "$ctx/rootfs/lib64"; cp -L /lib64/ld-linux-x86-64.so.2 "$ctx/rootfs/lib64/"; fi
printf 'root:x:0:0:root:/root:/sbin/nologin\nbundle:x:10001:10001:bundle:/tmp:/sbin/nologin\n' > "$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nbundle:x:10001:\n' > "$ctx/rootfs/etc/group"

cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs /
ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp
CMD ["node"]
DOCKERFILE

case "$backend" in
  buildah) buildah bud --format docker -t "$tag" "$ctx" >&2 ;;
  *) "$backend" build -t "$tag" "$ctx" >&2 ;;
esac
echo "$tag"
