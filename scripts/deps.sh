#!/usr/bin/env bash
# Installs the Debian packages kvsplice needs to build, test and run, only
# those missing, and mounts bpffs when it is absent. Idempotent; run by
# `make deps`, which make test, make run and the benchmarks run first.
#   scripts/deps.sh [PACKAGE...]   (extra packages: the data-path benchmark
#                                   asks for haproxy)
set -euo pipefail

PKGS=(
	clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev pkg-config
	liburing-dev libsystemd-dev libnl-3-dev libnl-route-3-dev libnl-idiag-3-dev
	libcmocka-dev libxxhash-dev iproute2 jq procps bsdextrautils gawk gnuplot-nox
	valgrind util-linux clang-format cmake g++ git
	libcurl4-openssl-dev libjansson-dev libevent-dev curl python3
	"$@"
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing packages: ${missing[*]}; run 'make deps' as root" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$(id -u)" -eq 0 ] && ! mountpoint -q /sys/fs/bpf; then
	mkdir -p /sys/fs/bpf
	mount -t bpf bpf /sys/fs/bpf
	echo "deps: mounted bpffs on /sys/fs/bpf"
fi
