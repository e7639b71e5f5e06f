#!/data/data/com.termux/files/usr/bin/bash
# Hearth companion on Android (Termux). Run in Termux; install the Termux:API app too,
# so that SMS, clipboard and battery tools use the phone's own APIs.
#   bash setup.sh [path/to/hearth-checkout]
set -euo pipefail
SRC=${1:-$PWD}
pkg update -y
pkg install -y python clang cmake ninja make rust binutils termux-api libsodium termux-services
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
export SODIUM_INSTALL=system
python -m venv "$HOME/.hearth-venv"
"$HOME/.hearth-venv/bin/pip" install --upgrade pip
echo "Building Hearth: pip compiles llama.cpp (llama-cpp-python) from C++ source, roughly"
echo "15-40 minutes on a phone, with no output while it compiles. Keep Termux in front."
"$HOME/.hearth-venv/bin/pip" install "$SRC"
mkdir -p "$HOME/bin"
for cmd in hearth; do ln -sf "$HOME/.hearth-venv/bin/$cmd" "$HOME/bin/$cmd"; done
# The resident companion as a termux-services (runit) service, started with `sv up hearth`.
mkdir -p "$PREFIX/var/service"
cp -R "$SRC/deploy/termux/service/hearth" "$PREFIX/var/service/"
chmod 755 "$PREFIX/var/service/hearth/run" "$PREFIX/var/service/hearth/log/run"
echo "Installed. Next:"
echo "  hearth models pull botpsy-0.8b --quant q4_k_m"
echo "  hearth init --model ~/.local/share/hearth/models/<the q4_k_m file>"
echo "  hearth pair -        # paste the URI from 'hearth-node invite' on your home PC"
echo "  sv-enable hearth     # the resident companion (restart Termux once if sv is missing)"
echo "  termux-wake-lock     # keep it running with the screen off"
