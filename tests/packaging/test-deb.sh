#!/usr/bin/env bash
# Build the Debian packages with scripts/build-deb.sh and inspect them:
#
#   tests/packaging/test-deb.sh [--no-build] [--with dpdk,rdma|auto|none] [--arch arm64]
#                               [--profile release|dev]   (default: auto, this machine's arch,
#                                                          build-deb.sh's profile)
#
# - every file the package promises is there (binary, man page, completions, docs, profiles,
#   copyright, changelog.Debian.gz), with root ownership and sane modes;
# - no maintainer script at all (so nothing runs at install or removal), no unit enabled;
# - Depends as dpkg-shlibdeps computes them: daqtune needs no DPDK or ibverbs library, the engine
#   packages need theirs and this exact daqtune;
# - the packaged binary runs and its man page and completions are the ones it generates;
# - dpkg installs it into an empty root and purges it again, leaving nothing behind;
# - lintian (when installed) reports no error or warning;
# - with --arch arm64 (cross-built, issue 25): every binary is an aarch64 ELF (e_machine 183),
#   dpkg-shlibdeps computed Depends from the arm64 libraries, and the payload checks above run
#   the packaged aarch64 binary under qemu-user.
# Exit 0 = all passed, 1 = a check failed (each printed as "FAIL: ..."), 2 = usage.
set -euo pipefail
cd "$(dirname "$0")/../.."

build_args=(--with auto)
arch=$(dpkg --print-architecture)
while (($#)); do
  case "$1" in
    --no-build) build_args+=(--no-build); shift ;;
    --with) build_args+=(--with "$2"); shift 2 ;;
    --arch) arch=$2; build_args+=(--arch "$2"); shift 2 ;;
    --profile) build_args+=(--profile "$2"); shift 2 ;;
    *) echo "test-deb: unknown argument $1" >&2; exit 2 ;;
  esac
done

fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok:   $*"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/debs
mapfile -t debs < <(scripts/build-deb.sh --out "$out" "${build_args[@]}")
((${#debs[@]} >= 1)) || { echo "FAIL: build-deb.sh produced no package"; exit 1; }

field() { dpkg-deb -f "$1" "$2"; }

# Run a binary of the package: natively, or under qemu-user for a cross-built arm64 package.
# elf_machine: the ELF header's e_machine (62 x86-64, 183 aarch64), read without `file`.
run_pkg=()
want_machine=62
case $arch in
  "$(dpkg --print-architecture)") if [[ $arch == arm64 ]]; then want_machine=183; fi ;;
  arm64) run_pkg=(qemu-aarch64); want_machine=183 ;;
  *) echo "test-deb: --arch takes arm64 (or this machine's architecture)" >&2; exit 2 ;;
esac
elf_machine() { od -An -tu2 -j18 -N2 "$1" | tr -d ' '; }

main=${debs[0]}
# The packages' payload, unpacked once: every check below runs the packaged binaries, never the
# build tree's (build-deb.sh's --profile, or DAQTUNE_DEB_PROFILE, says which build that was).
x=$tmp/x
dpkg-deb -x "$main" "$x"
for deb in "${debs[@]:1}"; do dpkg-deb -x "$deb" "$x"; done
if [[ $(basename "$main") =~ ^daqtune_[0-9][^_]*-[0-9]+_[a-z0-9]+\.deb$ ]]; then
  ok "name $(basename "$main")"
else
  fail "package file name $(basename "$main") is not daqtune_<version>-<rev>_<arch>.deb"
fi
[[ $(field "$main" Package) == daqtune ]] || fail "Package: $(field "$main" Package)"
[[ $(field "$main" Architecture) == "$arch" ]] || fail "Architecture: $(field "$main" Architecture), want $arch"
version=$(field "$main" Version)
bin_version=$("${run_pkg[@]}" "$x/usr/bin/daqtune" --version | awk '{print $2}')
if [[ $version == "$bin_version"-* ]]; then
  ok "version $version"
else
  fail "Version $version does not carry the binary's $bin_version"
fi

# --- contents --------------------------------------------------------------------------------
dpkg-deb -c "$main" >"$tmp/contents"
want=(
  ./usr/bin/daqtune
  ./usr/share/man/man8/daqtune.8.gz
  ./usr/share/bash-completion/completions/daqtune
  ./usr/share/zsh/vendor-completions/_daqtune
  ./usr/share/fish/vendor_completions.d/daqtune.fish
  ./usr/share/doc/daqtune/copyright
  ./usr/share/doc/daqtune/changelog.Debian.gz
  ./usr/share/doc/daqtune/rust-crates.txt
)
# Debian policy 12.3: documentation over 4 KiB is shipped gzipped (build-deb.sh's compress_docs).
doc_name() { # SOURCE FILE, PACKAGED PATH
  if (($(stat -c %s "$1") > 4096)); then echo "$2.gz"; else echo "$2"; fi
}
want+=("$(doc_name docs/checks/README.md ./usr/share/doc/daqtune/checks/README.md)")
for f in docs/*.md README.md; do
  want+=("$(doc_name "$f" "./usr/share/doc/daqtune/$(basename "$f")")")
done
for p in platforms/*.yaml; do
  # A profile over 4 KiB is gzipped like any other document (generic-dgpu.yaml grew past it).
  want+=("$(doc_name "$p" "./usr/share/doc/daqtune/profiles/$(basename "$p")")")
done
awk '{print $6}' "$tmp/contents" >"$tmp/paths"
for f in "${want[@]}"; do
  grep -qxF "$f" "$tmp/paths" || fail "missing $f"
done
# The resolved profiles are written by the binary at build time: their size (so .gz or not) is
# known only then.
for p in platforms/*.yaml; do
  f="./usr/share/doc/daqtune/profiles/$(basename "$p" .yaml).resolved.yaml"
  grep -qxF -e "$f" -e "$f.gz" "$tmp/paths" || fail "missing $f(.gz)"
done
for id in $("${run_pkg[@]}" "$x/usr/bin/daqtune" explain --list 2>/dev/null | awk 'NF {print $1}' | grep -E '^[a-z]+(\.[a-z0-9-]+)?$'); do
  [[ -f docs/checks/$id.md ]] || continue
  grep -q " ./usr/share/doc/daqtune/checks/$id.md\(.gz\)\?$" "$tmp/contents" || fail "check page $id.md not packaged"
done
awk '$2 != "root/root" {print}' "$tmp/contents" | grep . && fail "files not owned by root/root"
awk '$1 ~ /^-/ && $6 != "./usr/bin/daqtune" && $1 != "-rw-r--r--" {print}' "$tmp/contents" | grep . && fail "data files not 0644"
grep -qE '^-rwxr-xr-x .* \./usr/bin/daqtune$' "$tmp/contents" || fail "/usr/bin/daqtune is not 0755"
# Nothing enabled: no symlink into a *.wants directory, no /etc/systemd.
grep -E '\.wants/|\./etc/systemd/' "$tmp/contents" && fail "the package enables a unit"
for u in deploy/systemd/*.service deploy/systemd/*.timer; do
  [[ -e $u ]] || continue
  grep -q " ./usr/lib/systemd/system/$(basename "$u")$" "$tmp/contents" || fail "unit $u not packaged"
done
if [[ -f deploy/default/daqtune ]]; then
  grep -q ' ./etc/default/daqtune$' "$tmp/contents" || fail "/etc/default/daqtune not packaged"
fi
ok "$(wc -l <"$tmp/contents") entries listed"

# --- control ---------------------------------------------------------------------------------
for deb in "${debs[@]}"; do
  pkg=$(field "$deb" Package)
  dpkg-deb -I "$deb" >"$tmp/info-$pkg"
  # Members of the control archive other than control/md5sums/conffiles would be scripts.
  members=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t | sed 's|^\./||' | grep -v '^$' | sort | tr '\n' ' ')
  case "$members" in
    "control md5sums "|"conffiles control md5sums ") ok "$pkg: control members: $members" ;;
    *) fail "$pkg: unexpected control members (maintainer scripts or triggers?): $members" ;;
  esac
  if [[ -n $(dpkg-deb -f "$deb" Pre-Depends) ]]; then fail "$pkg has Pre-Depends"; fi
  # Every path in md5sums exists in the data archive.
  dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./md5sums | awk '{print "./"$2}' | sort >"$tmp/md5-$pkg"
  dpkg-deb -c "$deb" | awk '$1 ~ /^-/ {print $6}' | sort >"$tmp/files-$pkg"
  cmp -s "$tmp/md5-$pkg" "$tmp/files-$pkg" || fail "$pkg: md5sums does not list exactly the package's files"
done

deps=$(field "$main" Depends)
if [[ $deps == *libc6* ]]; then ok "daqtune Depends: $deps"; else fail "daqtune Depends lacks libc6: $deps"; fi
if [[ $deps =~ (librte|libdpdk|libibverbs|librdmacm) ]]; then
  fail "daqtune depends on an engine library ($deps): daqtune must start without them"
fi
[[ $(field "$main" Description) == *"daqtune revert"* ]] || fail "the description does not say that revert undoes apply"
for deb in "${debs[@]:1}"; do
  pkg=$(field "$deb" Package)
  d=$(field "$deb" Depends)
  [[ $d == *"daqtune (= $version)"* ]] || fail "$pkg does not depend on daqtune (= $version): $d"
  case $pkg in
    daqtune-dpdk) [[ $d == *librte* ]] || fail "$pkg Depends lacks the DPDK libraries: $d" ;;
    daqtune-rdma) [[ $d == *libibverbs1* ]] || fail "$pkg Depends lacks libibverbs1: $d" ;;
  esac
  grep -qxF "./usr/bin/$pkg" "$tmp/files-$pkg" || fail "$pkg lacks /usr/bin/$pkg"
  grep -qxF "./usr/share/doc/$pkg/copyright" "$tmp/files-$pkg" || fail "$pkg lacks its copyright"
  grep -qxF "./usr/share/man/man8/$pkg.8.gz" "$tmp/files-$pkg" || fail "$pkg lacks its man page"
  ok "$pkg Depends: $d"
done

# --- the payload works ----------------------------------------------------------------------
for b in "$x"/usr/bin/*; do
  m=$(elf_machine "$b")
  if [[ $m == "$want_machine" ]]; then
    ok "$(basename "$b") is an ELF for $arch (e_machine $m)"
  else
    fail "$(basename "$b") has e_machine '$m', want $want_machine ($arch)"
  fi
done
# The packaged binary is this tree's: its version is the workspace's.
src_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
if [[ -z $src_version ]]; then
  fail "no version = \"...\" line in the workspace's Cargo.toml to compare the package with"
elif [[ $bin_version != "$src_version" ]]; then
  fail "packaged daqtune --version says $bin_version, the workspace is $src_version"
fi
zcat "$x/usr/share/man/man8/daqtune.8.gz" >"$tmp/man"
grep -q '^\.TH daqtune 8 ' "$tmp/man" || fail "man page has no '.TH daqtune 8' header"
# The page is `daqtune man` with the section set to 8 (what the generated units name).
"${run_pkg[@]}" "$x/usr/bin/daqtune" man | sed '0,/^\.TH daqtune 1 /s//.TH daqtune 8 /' >"$tmp/man.want"
cmp -s "$tmp/man" "$tmp/man.want" || fail "man page differs from 'daqtune man' (section 8)"
named=$(grep -rhoE 'man:daqtune\([0-9]\)' units/src | sort -u | tr '\n' ' ')
[[ -z $named || $named == "man:daqtune(8) " ]] \
  || fail "units name a section of daqtune's man page the package does not install: $named"
cmp -s "$x/usr/share/bash-completion/completions/daqtune" <("${run_pkg[@]}" "$x/usr/bin/daqtune" completions bash) \
  || fail "bash completion differs from 'daqtune completions bash'"
bash -n "$x/usr/share/bash-completion/completions/daqtune" || fail "bash completion does not parse"
grep -q '^#compdef daqtune' "$x/usr/share/zsh/vendor-completions/_daqtune" || fail "zsh completion has no #compdef"
grep -q '^complete -c daqtune' "$x/usr/share/fish/vendor_completions.d/daqtune.fish" || fail "fish completion has no 'complete -c daqtune'"
grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' "$x/usr/share/doc/daqtune/copyright" \
  || fail "copyright is not in the machine-readable format"
[[ $(zcat "$x/usr/share/doc/daqtune/changelog.Debian.gz") == "daqtune ($version) "* ]] \
  || fail "changelog.Debian.gz does not start with daqtune ($version)"
grep -q '^clap ' "$x/usr/share/doc/daqtune/rust-crates.txt" || fail "rust-crates.txt does not list clap"
ok "payload: binary, man page, completions, copyright, changelog"

# --- install into an empty root and purge: nothing left ------------------------------------
if command -v dpkg >/dev/null && [[ $(id -u) == 0 ]]; then
  r=$tmp/root
  mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/log"
  : >"$r/var/lib/dpkg/status"
  : >"$r/var/lib/dpkg/available"
  (cd "$r" && find . | sort) >"$tmp/before"
  # --force-depends: the empty root has no libc6 package; --force-architecture for a
  # cross-built package (the empty root knows no foreign architecture). Nothing else is forced.
  force=(--force-depends)
  [[ $arch == "$(dpkg --print-architecture)" ]] || force+=(--force-architecture)
  if dpkg --root="$r" --log=/dev/null "${force[@]}" -i "$main" >"$tmp/dpkg-i.log" 2>&1; then
    [[ -x $r/usr/bin/daqtune ]] || fail "dpkg --root -i did not install /usr/bin/daqtune"
    find "$r/etc" "$r/usr/lib/systemd/system" -name '*.wants' 2>/dev/null | grep . && fail "install created a .wants directory"
    dpkg --root="$r" --log=/dev/null --purge daqtune >"$tmp/dpkg-p.log" 2>&1 || fail "dpkg --purge failed: $(cat "$tmp/dpkg-p.log")"
    (cd "$r" && find . | sort) | grep -v '^\./var/lib/dpkg/' >"$tmp/after"
    if grep -v '^\./var/lib/dpkg/' "$tmp/before" | diff - "$tmp/after" >"$tmp/left"; then
      ok "dpkg -i then --purge into an empty root leaves it as it was"
    else
      fail "purge left files behind: $(cat "$tmp/left")"
    fi
  else
    fail "dpkg --root -i failed: $(cat "$tmp/dpkg-i.log")"
  fi
else
  echo "skip: install/purge round trip needs root and dpkg"
fi

# --- lintian ---------------------------------------------------------------------------------
if command -v lintian >/dev/null; then
  for deb in "${debs[@]}"; do
    # E: and W: are findings; I:/P: (hardening of the bundled zstd C code, pedantic) are not.
    lintian --allow-root --no-tag-display-limit "$deb" >"$tmp/lintian" 2>&1 || true
    if grep -E '^[EW]: ' "$tmp/lintian"; then
      fail "lintian flags $(basename "$deb")"
    else
      ok "lintian: $(basename "$deb") clean of errors and warnings"
    fi
  done
else
  echo "skip: lintian not installed (apt install lintian)"
fi

for deb in "${debs[@]}"; do
  echo "size: $(basename "$deb") $(stat -c %s "$deb") bytes, installed $(field "$deb" Installed-Size) KiB"
done
if ((fails)); then
  echo "test-deb: $fails check(s) failed"
  exit 1
fi
echo "test-deb: all checks passed"
