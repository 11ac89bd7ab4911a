#!/usr/bin/env bash
# What a GPU machine without our dependencies needs for scripts/device_learning_check.sh, in .gpu_carry/
# (git-ignored; with the working tree under the device's 64 MiB): CPython 3.12 wheels of the packages the device
# image lacks, Tesseract with its shared libraries and English data (this machine's build, so its readings match
# the OCR cache made here), and the OCR cache file given as $1, if any. vtb-gym itself is built there from the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
carry=.gpu_carry
rm -rf "$carry" && mkdir -p "$carry/whl" "$carry/tess/bin" "$carry/tess/lib" "$carry/tess/tessdata"
# what the device image lacks (/work/.library/device/KINDS.md lists what it has), at this venv's tested versions
missing="gymnasium farama-notifications json-repair jsonschema jsonschema-specifications referencing rpds-py anyascii
  pytesseract pyseccomp openai distro jiter sniffio pydantic pydantic-core annotated-types typing-inspection
  beautifulsoup4 soupsieve trl datasets dill multiprocess jmespath"
pins=$(.venv/bin/python -c 'import sys; from importlib.metadata import version
print(" ".join(f"{n}=={version(n)}" for n in sys.argv[1:]))' $missing)
platforms=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
.venv/bin/pip download -q --only-binary=:all: --python-version 3.12 "${platforms[@]}" --platform any --no-deps \
  -d "$carry/whl" $pins
# the pinned typefaces are source distributions: built here (pure Python)
.venv/bin/pip wheel -q --no-deps -w "$carry/whl" font-source-sans-pro==0.0.1 font-source-serif-pro==0.0.1 \
  font-roboto==0.0.1 font-lato==0.1.0 font-caladea==0.0.2 font-manrope==0.0.2
tess=$(command -v tesseract)
cp "$tess" "$carry/tess/bin/"
# its libraries but the C runtime's, which any newer glibc machine has
ldd "$tess" | awk '/=>/ {print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' \
  | xargs -I{} cp -L {} "$carry/tess/lib/"
cp /usr/share/tesseract-ocr/5/tessdata/eng.traineddata "$carry/tess/tessdata/"
tar cJf "$carry/tess.tar.xz" -C "$carry" tess && rm -rf "$carry/tess"
[ -n "${1:-}" ] && cp "$1" "$carry/ocr_cache.json"
du -sh "$carry"
