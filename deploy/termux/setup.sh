#!/data/data/com.termux/files/usr/bin/bash
# Hearth companion on Android (Termux). Run in Termux; install the Termux:API app too,
# so that SMS, clipboard and battery tools use the phone's own APIs.
#   bash setup.sh [path/to/hearth-checkout]
set -euo pipefail
SRC=${1:-$PWD}
pkg update -y
pkg install -y python clang cmake ninja make rust binutils termux-api libsodium
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
export SODIUM_INSTALL=system
python -m venv "$HOME/.hearth-venv"
"$HOME/.hearth-venv/bin/pip" install --upgrade pip
"$HOME/.hearth-venv/bin/pip" install "$SRC"
mkdir -p "$HOME/bin"
for cmd in hearth; do ln -sf "$HOME/.hearth-venv/bin/$cmd" "$HOME/bin/$cmd"; done
echo "Installed. Next:"
echo "  hearth models pull botpsy-0.8b --quant q4_k_m"
echo "  hearth init --model ~/.local/share/hearth/models/<the q4_k_m file>"
echo "  hearth pair -        # paste the URI from 'hearth-node invite' on your home PC"
