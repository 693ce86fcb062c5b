#!/bin/bash
# A Python from an older Debian release's packages, unpacked into PREFIX as any user: no root,
# nothing installed, the node's own apt state untouched.
#
#   unpack_debian_python.sh PREFIX MIRROR SUITE KEYRING PATCHELF PYTHON PACKAGE=VERSION...
#
# apt-get reads the release's index into a private folder (the release's signature checked
# against KEYRING) and downloads the exact packages; dpkg-deb unpacks them into PREFIX. The
# extension modules that link a library the node's own release no longer ships (libffi.so.7,
# libssl.so.1.1, libmpdec.so.3 on Debian 12) find the release's copy beside them: PATCHELF
# gives each module a RUNPATH to PREFIX's library folder. The interpreter finds its standard
# library from its own place (PREFIX/usr/bin -> PREFIX/usr/lib/pythonX.Y). PREFIX/SOURCES
# lists every package's address, file, size and SHA256.
set -euo pipefail
prefix=$1 mirror=$2 suite=$3 keyring=$4 patchelf=$5 python=$6
shift 6
for tool in apt-get dpkg-deb dpkg; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "no $tool on $(hostname): unpacking Debian's python$python needs apt-get and" \
             "dpkg-deb (a Debian or Ubuntu node); set \`python_source: path\` in the" \
             "inventory to use a python$python on PATH, or \`conda\`" >&2
        exit 3
    fi
done
mkdir -p "$(dirname "$prefix")"
work=$(mktemp -d "$prefix.unpacking.XXXXXX")  # beside PREFIX: the last step is a rename
# apt's own state in the temporary folder: a sources.list cannot quote a path with a space
state=$(mktemp -d)
trap 'rm -rf "$work" "$state"' EXIT
arch=$(dpkg --print-architecture)
mkdir -p "$state/lists/partial" "$state/archives/partial" "$state/parts" "$work/debs" \
    "$work/root"
cp "$keyring" "$state/keyring.gpg"
echo "deb [signed-by=$state/keyring.gpg] $mirror $suite main" >"$state/sources.list"
apt=(apt-get -q -o "Dir::State=$state" -o "Dir::State::Lists=$state/lists"
     -o "Dir::State::status=/dev/null" -o "Dir::Cache=$state"
     -o "Dir::Cache::archives=$state/archives" -o "Dir::Etc::SourceList=$state/sources.list"
     -o "Dir::Etc::SourceParts=$state/parts" -o "Dir::Etc::Preferences=$state/parts/none"
     -o "Dir::Etc::PreferencesParts=$state/parts" -o "Debug::NoLocking=1"
     -o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
     -o "APT::Sandbox::User=$(id -un)")
"${apt[@]}" update >/dev/null
echo "$suite's index read from $mirror (signature checked against $(basename "$keyring"))"
(cd "$work/debs" && "${apt[@]}" download "$@" >/dev/null)
# each package's address, file, size and SHA256 (apt checked the files against them)
"${apt[@]}" download --print-uris "$@" | tr -d "'" >"$work/root/SOURCES"
for deb in "$work"/debs/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
done
dynload="$work/root/usr/lib/python$python/lib-dynload"
libs=$(cd "$work/root/usr/lib" && ls -d ./*-linux-gnu | head -n 1)
for module in "$dynload"/*.so; do
    "$patchelf" --set-rpath "\$ORIGIN/../../${libs#./}" "$module"
done
# the modules pip and the frameworks need: a missing library stops here, named by ldd
if ! "$work/root/usr/bin/python$python" -c \
        'import ssl, ctypes, decimal, hashlib, sqlite3, lzma, bz2, zlib, distutils.cmd, lib2to3'
then
    echo "the unpacked python$python cannot load its modules; libraries not found:" >&2
    for module in "$dynload"/*.so; do ldd "$module" | grep 'not found' >&2 || true; done
    exit 4
fi
rm -rf "$prefix"
mv "$work/root" "$prefix"
echo "python$python unpacked into $prefix: $(wc -l <"$prefix/SOURCES") packages"
