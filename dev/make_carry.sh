#!/usr/bin/env bash
# Builds the two git-ignored folders a device run carries (the device tool's `carry`: 64 MiB in all):
#   .whl/    cp312 manylinux wheels the device image lacks: numpy 2.3.5 (its numpy 2.5 breaks
#            numba-cuda), nbgrader with what it needs to autograde (no jupyterlab, notebook, scipy),
#            nvidia-cutlass (the CUTLASS headers of 05.03's cell); about 54 MB;
#   .carry/  bwrap/bwrap (Debian's bubblewrap and its libraries behind a wrapper: the device has no
#            bubblewrap, and the judge runs each notebook in it) and dev_env.sh, which a device script
#            sources: dev/env_min.sh (the wheels installed into /tmp/site, on PYTHONPATH),
#            and /tmp/site/bin on PATH (nbgrader runs `alembic` as a program).
# Run here (not on the device), from the repo root: bash dev/make_carry.sh. Needs pip and apt (root).
set -eu
rm -rf .whl .carry
mkdir -p .whl .carry/bwrap/lib
pip download -q -d .whl --python-version 3.12 --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  "numpy==2.3.5" nbgrader nvidia-cutlass
# what autograding does not import (nbgrader imports rapidfuzz: kept; ipykernel runs without debugpy), or the
# device has (cuda-core, cuda-bindings), or is too large: the tree and the carry must stay under 64 MiB
for p in scipy jupyterlab jupyterlab_server jupyterlab_widgets notebook notebook_shim babel cuda_bindings \
         cuda_core cuda_pathfinder cuda_python widgetsnbextension ipywidgets networkx jupyter_builder \
         jedi parso setuptools json5 jupyter_lsp async_lru debugpy; do
  rm -f .whl/"$p"-*.whl
done
command -v bwrap >/dev/null || apt-get install -y -q bubblewrap >/dev/null
cp "$(command -v bwrap)" .carry/bwrap/bwrap.bin
for lib in $(ldd "$(command -v bwrap)" | awk '/=> \// {print $3}' | grep -v -E '/libc\.so'); do cp "$lib" .carry/bwrap/lib/; done
cat > .carry/bwrap/bwrap <<'EOF'
#!/bin/sh
# bubblewrap with the libraries it came with; the sandboxed program does not inherit them
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib" exec "$here/bwrap.bin" --unsetenv LD_LIBRARY_PATH "$@"
EOF
chmod +x .carry/bwrap/bwrap
cat > .carry/dev_env.sh <<'EOF'
# sourced on the device machine, from the repo root: env_min.sh's wheel install, and nbgrader's programs on PATH
source dev/env_min.sh || return 1
export PATH=/tmp/site/bin:$PATH
python3 -c "import nbgrader; print('nbgrader', nbgrader.__version__)"
EOF
du -sh .whl .carry
