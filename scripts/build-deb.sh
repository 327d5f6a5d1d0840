#!/usr/bin/env bash
# Build the Debian packages of daqtune with dpkg-deb (no debhelper, no cargo-deb):
#
#   scripts/build-deb.sh [--arch amd64|arm64] [--with dpdk,rdma|auto|none] [--profile release|dev]
#                        [--no-build] [--out DIR] [--check]
#
#   target/debian/daqtune_<version>_<arch>.deb        /usr/bin/daqtune, daqtune(8), completions, docs
#   target/debian/daqtune-dpdk_<version>_<arch>.deb   with --with dpdk (links the system libdpdk)
#   target/debian/daqtune-rdma_<version>_<arch>.deb   with --with rdma (links libibverbs)
#
# --with auto builds an engine package where its library's headers are installed (as
# scripts/test-all.sh builds the engines). --no-build packages what target/release (or the
# profile's directory) already holds. --check only asks whether this machine can build the
# packages asked for (dpkg tools, cargo, the cross toolchain and its C library, the Rust
# target; not the engines' headers): exit 0, or 1 with the reason on stderr, nothing built
# (tests/vm/host-lifecycle.sh turns that reason into a skip).
# --profile dev (or DAQTUNE_DEB_PROFILE=dev) builds and packages cargo's dev profile instead of
# release (target/debug): the README's test command packages that for its package and lifecycle
# tests, where the release build's thin LTO would cost minutes and prove only that it links
# (docs/apply.md, "Which build the tests package"). Never ship one: the build says so on stderr.
# --arch arm64 on an amd64 machine cross-builds for aarch64-unknown-linux-gnu (IGX Orin, DGX
# Spark): rustup's target, Debian's gcc-aarch64-linux-gnu as linker (.cargo/config.toml), the
# engines against the :arm64 multiarch -dev packages (bindgen parses the arm64 headers), and the
# binary runs under qemu-user (qemu-aarch64, libc6:arm64) for its man page and completions.
# The binaries then come from target/aarch64-unknown-linux-gnu/release (or debug).
# Needs: cargo (unless --no-build), dpkg-deb and dpkg-shlibdeps (dpkg-dev), gzip, strip (binutils):
# what `apt install build-essential` brings. Runs as any user: ownership in the archives is
# root:root through dpkg-deb --root-owner-group, no fakeroot.
#
# The packages run nothing at install or removal (no maintainer scripts) and enable no unit.
# docs/apply.md ("Install") says why the engines are packages of their own.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

with=none
build=1
check=0
arch_opt=""
profile=${DAQTUNE_DEB_PROFILE:-release}

out=$repo/target/debian
while (($#)); do
  case "$1" in
    --with) with=$2; shift 2 ;;
    --with=*) with=${1#--with=}; shift ;;
    --no-build) build=0; shift ;;
    --check) check=1; shift ;;
    --out) out=$(realpath -m -- "$2"); shift 2 ;;
    --arch) arch_opt=$2; shift 2 ;;
    --arch=*) arch_opt=${1#--arch=}; shift ;;
    --profile) profile=$2; shift 2 ;;
    --profile=*) profile=${1#--profile=}; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "build-deb: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "build-deb: $*" >&2; exit 1; }
# cargo's name for the profile and the directory its binaries land in.
case $profile in
  release) profile_dir=release ;;
  dev) profile_dir=debug ;;
  *) echo "build-deb: --profile takes release or dev, not '$profile'" >&2; exit 2 ;;
esac
for tool in dpkg-deb dpkg-shlibdeps dpkg-architecture gzip strip; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (apt install build-essential dpkg-dev)"
done

# The package's architecture and, when it is not this machine's, the cross tools.
build_arch=$(dpkg-architecture -qDEB_BUILD_ARCH)
arch=${arch_opt:-$build_arch}
cargo_target=()
rel=$repo/target/$profile_dir
strip_tool="strip"
objdump_tool=objdump
run_target=()
if [[ $arch != "$build_arch" ]]; then
  case $arch in
    arm64) triple=aarch64-unknown-linux-gnu gnu=aarch64-linux-gnu qemu=qemu-aarch64 ;;
    *) echo "build-deb: --arch takes $build_arch or arm64, not '$arch'" >&2; exit 2 ;;
  esac
  for tool in "$gnu-gcc:gcc-$gnu" "$gnu-strip:binutils-$gnu" "$gnu-objdump:binutils-$gnu" "$qemu:qemu-user"; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || die "${tool%%:*} not found (apt install ${tool#*:})"
  done
  # The cross compiler's sysroot (a Recommends of gcc-$gnu only): crt files and headers.
  [[ -e /usr/$gnu/include/stdio.h ]] \
    || die "the cross compiler has no $arch C library headers (apt install libc6-dev-$arch-cross)"
  [[ -e /usr/lib/$gnu/libc.so.6 || -e /lib/$gnu/libc.so.6 ]] \
    || die "no $arch C library to run the binary with (dpkg --add-architecture $arch; apt install libc6:$arch)"
  if ((build)) && command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "$triple"; then
    die "the Rust target $triple is not installed (rustup target add $triple)"
  fi
  cargo_target=(--target "$triple")
  rel=$repo/target/$triple/$profile_dir
  strip_tool=$gnu-strip
  objdump_tool=$gnu-objdump
  run_target=("$qemu")
  # dpkg-shlibdeps reads the target's libraries and their shlibs/symbols files (multiarch).
  export DEB_HOST_ARCH=$arch
fi
((build == 0)) || command -v cargo >/dev/null 2>&1 || die "cargo not found"

engines=()
case "$with" in
  none|"") ;;
  auto)
    pkg-config --exists libdpdk 2>/dev/null && engines+=(dpdk)
    if pkg-config --exists libibverbs 2>/dev/null || [[ -e /usr/include/infiniband/verbs.h ]]; then
      engines+=(rdma)
    fi
    ;;
  *)
    IFS=, read -r -a engines <<<"$with"
    for e in "${engines[@]}"; do
      [[ $e == dpdk || $e == rdma ]] || { echo "build-deb: --with takes dpdk, rdma, auto or none, not '$e'" >&2; exit 2; }
    done
    ;;
esac
((check == 0)) || exit 0

# Reproducible: every timestamp is the last commit's (or now outside a git checkout). Not
# exported to cargo: zstd-sys's build script reruns whenever it changes.
if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
  SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
fi
commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
maintainer="${DEBFULLNAME:-daqtune developers} <${DEBEMAIL:-daqtune@users.noreply.github.com}>"

[[ $profile == release ]] ||
  echo "build-deb: profile $profile (from $rel): a package for tests, not for release" >&2
if ((build)); then
  echo "build-deb: cargo build --profile $profile ${cargo_target[*]} -p daqtune" >&2
  cargo build --profile "$profile" --locked "${cargo_target[@]}" -p daqtune
  # The engines in one cargo run: one feature resolution for both, the one the workspace's test
  # build makes (Cargo.toml's cc and probe/Cargo.toml's getrandom and rustix say why), so after
  # `cargo test --workspace --features daqtune-dpdk/dpdk,daqtune-rdma/rdma` nothing is compiled
  # again. Built one at a time they each resolved their dependencies' features anew: the README
  # command compiled 22 crates again for daqtune-dpdk and 16 for daqtune-rdma (1 min 45 s and
  # 35 s beside the fleet's guests, 2026-11-29).
  if ((${#engines[@]})); then
    engine_args=()
    for e in "${engines[@]}"; do engine_args+=(-p "daqtune-$e" --features "daqtune-$e/$e"); done
    echo "build-deb: cargo build --profile $profile ${cargo_target[*]} ${engine_args[*]}" >&2
    cargo build --profile "$profile" --locked "${cargo_target[@]}" "${engine_args[@]}"
  fi
fi
export SOURCE_DATE_EPOCH
bin=$rel/daqtune
[[ -x $bin ]] || die "$bin is missing (run without --no-build)"
# The packaged binary itself writes its man page, completions and resolved profiles (under
# qemu-user for another architecture).
runbin() { "${run_target[@]}" "$bin" "$@"; }
upstream=$(runbin --version | awk '{print $2}')
[[ $upstream =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || die "'$bin --version' gave no usable version: $upstream"
# A Debian revision (DEB_REVISION, default 1): the packaging is not part of an upstream tarball,
# so this is not a native package and its changelog is changelog.Debian.gz.
version=$upstream-${DEB_REVISION:-1}

mkdir -p "$out"
# A private staging area: two builds in one checkout must not share it. dpkg-shlibdeps wants
# to run beside a debian/control and to find binaries in debian/<package>/.
work=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$work"' EXIT
umask 022
mkdir -p "$work/debian"
: >"$work/debian/control"

# --- helpers ----------------------------------------------------------------------------------
# dh_compress's rule: documentation above 4 KiB is gzipped (copyright never).
compress_docs() {
  find "$1" -type f -size +4k ! -name copyright ! -name '*.gz' -print0 | xargs -0 -r gzip -9n
}

changelog() { # PACKAGE
  {
    printf '%s (%s) unstable; urgency=medium\n\n' "$1" "$version"
    printf '  * Built from daqtune commit %s with scripts/build-deb.sh.\n\n' "$commit"
    printf ' -- %s  %s\n' "$maintainer" "$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
  } | gzip -9n >"$2/changelog.Debian.gz"
}

shlibs() { # PACKAGE FILE -> the shlibs:Depends value
  (cd "$work" && dpkg-shlibdeps -O -e"${2#"$work"/}" 2>"$work/shlibdeps-$1.log") \
    | sed -n 's/^shlibs:Depends=//p'
}

build_package() { # PACKAGE DEPENDS
  local pkg=$1 depends=$2 root=$work/debian/$1
  local size
  mkdir -p "$root/DEBIAN"
  size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  sed -e "s|@VERSION@|$version|g" -e "s|@ARCH@|$arch|g" -e "s|@MAINTAINER@|$maintainer|g" \
    -e "s|@INSTALLED_SIZE@|$size|g" -e "s|@DEPENDS@|$depends|g" \
    "$repo/packaging/debian/$pkg.control" >"$root/DEBIAN/control"
  if [[ -d $root/etc ]]; then
    (cd "$root" && find etc -type f | sort | sed 's|^|/|') >"$root/DEBIAN/conffiles"
  fi
  (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
    | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
  chmod 0644 "$root/DEBIAN/"*
  find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  local deb=$out/${pkg}_${version}_${arch}.deb
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb.tmp" >/dev/null
  mv -f "$deb.tmp" "$deb"
  echo "build-deb: $deb ($(du -k "$deb" | cut -f1) KiB, installed $size KiB)" >&2
  echo "$deb"
}

# --- daqtune -----------------------------------------------------------------------------------
root=$work/debian/daqtune
doc=$root/usr/share/doc/daqtune
install -D -m 0755 "$bin" "$root/usr/bin/daqtune"
$strip_tool --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/daqtune"

# Section 8: daqtune changes the host as root (Debian policy 12.1), and the units it writes name
# man:daqtune(8); `daqtune man` renders that page (section 8, every subcommand's options).
install -d "$root/usr/share/man/man8"
runbin man | gzip -9n >"$root/usr/share/man/man8/daqtune.8.gz"
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
runbin completions bash >"$root/usr/share/bash-completion/completions/daqtune"
runbin completions zsh >"$root/usr/share/zsh/vendor-completions/_daqtune"
runbin completions fish >"$root/usr/share/fish/vendor_completions.d/daqtune.fish"

install -d "$doc/checks" "$doc/profiles"
install -m 0644 README.md docs/*.md "$doc/"
install -m 0644 docs/checks/*.md "$doc/checks/"
# The built-in profiles, commented as they are compiled in: what `extends:` builds on.
install -m 0644 platforms/*.yaml "$doc/profiles/"
for p in platforms/*.yaml; do
  n=$(basename "$p" .yaml)
  runbin profiles show "$n" >"$doc/profiles/$n.resolved.yaml"
done
install -m 0644 packaging/debian/copyright "$doc/copyright"
if command -v cargo >/dev/null 2>&1; then
  {
    echo "# Rust crates linked into /usr/bin/daqtune (cargo tree -e normal,no-proc-macro):"
    echo "# name version licence"
    # Its error (a Cargo.lock that no longer matches Cargo.toml, say) ends the build with
    # cargo's own words: set -e alone ended it with none.
    cargo tree --locked --offline "${cargo_target[@]}" -p daqtune -e normal,no-proc-macro --prefix none -f '{p}|{l}' 2>"$work/cargo-tree.err" \
      | grep -v ' (\*)$' | grep -v '^daqtune' | sed 's/ v\([^ |]*\)[^|]*|/ \1 /' | LC_ALL=C sort -u
  } >"$doc/rust-crates.txt" || die "cargo tree (the crate list of the package): $(head -n 1 "$work/cargo-tree.err")"
fi
changelog daqtune "$doc"
compress_docs "$doc"

# Units and defaults of deploy/ (the report timer), shipped disabled: nothing enables or starts
# them at install; /etc/default/daqtune is a conffile (kept on upgrade when edited).
shopt -s nullglob
units=(deploy/systemd/*.service deploy/systemd/*.timer)
shopt -u nullglob
if ((${#units[@]})); then
  install -d "$root/usr/lib/systemd/system"
  install -m 0644 "${units[@]}" "$root/usr/lib/systemd/system/"
fi
if [[ -f deploy/default/daqtune ]]; then
  install -D -m 0644 deploy/default/daqtune "$root/etc/default/daqtune"
fi
if [[ -f packaging/debian/daqtune.lintian-overrides ]]; then
  install -D -m 0644 packaging/debian/daqtune.lintian-overrides "$root/usr/share/lintian/overrides/daqtune"
fi

debs=()
debs+=("$(build_package daqtune "$(shlibs daqtune "$root/usr/bin/daqtune")")")

# --- engines -----------------------------------------------------------------------------------
for e in "${engines[@]}"; do
  pkg=daqtune-$e
  ebin=$rel/$pkg
  [[ -x $ebin ]] || die "$ebin is missing (build it with: cargo build --profile $profile ${cargo_target[*]} -p $pkg --features $e)"
  root=$work/debian/$pkg
  install -D -m 0755 "$ebin" "$root/usr/bin/$pkg"
  $strip_tool --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$pkg"
  # A binary built without its feature says so and exits: refuse to package that.
  needed=$($objdump_tool -p "$root/usr/bin/$pkg" 2>/dev/null | awk '$1 == "NEEDED" {print $2}')
  if ! grep -Eq "^lib(rte_|ibverbs)" <<<"$needed"; then
    die "$ebin does not link $([[ $e == dpdk ]] && echo libdpdk || echo libibverbs): was it built with --features $e?"
  fi
  # A short hand-written page: the engines are run by `daqtune selftest`, their options are
  # in --help and the packaged docs.
  install -d "$root/usr/share/man/man8"
  gzip -9n <"packaging/debian/$pkg.8" >"$root/usr/share/man/man8/$pkg.8.gz"
  edoc=$root/usr/share/doc/$pkg
  install -d "$edoc"
  install -m 0644 packaging/debian/copyright "$edoc/copyright"
  install -m 0644 "docs/selftest-$e.md" "$edoc/"
  changelog "$pkg" "$edoc"
  compress_docs "$edoc"
  if [[ -f packaging/debian/$pkg.lintian-overrides ]]; then
    install -D -m 0644 "packaging/debian/$pkg.lintian-overrides" "$root/usr/share/lintian/overrides/$pkg"
  fi
  dep=$(shlibs "$pkg" "$root/usr/bin/$pkg")
  [[ -n $dep ]] || die "dpkg-shlibdeps found no dependencies for $pkg: $(cat "$work/shlibdeps-$pkg.log")"
  debs+=("$(build_package "$pkg" "$dep")")
done

printf '%s\n' "${debs[@]}"
