#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine, only when missing:
# ZooKeeper 3.8 (server jars), real Curator 5.4 and curator-x-discovery (for interop tests), a JDK (javac compiles the
# Curator peer), and the rustfmt/clippy components.
set -euo pipefail

need=()
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
[ -f /usr/share/java/curator-recipes.jar ] || need+=(libcurator-recipes-java)
# curator-x-discovery (and Jackson): the Curator side of the benchmark (shared/bench/curator),
# which the interop tests run, compiles against it.
[ -f /usr/share/java/curator-x-discovery.jar ] || need+=(libcurator-discovery-java)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
# A C compiler: the linker for Rust, and aws-lc-sys (rustls, feature `tls`) builds C code with it.
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# The semver check (.ci/semver) runs beside the test suite once there is a release tag: its tool is
# built here, not there (a few minutes, once).
if git -C "$(dirname "$0")/.." describe --tags --abbrev=0 --match 'v[0-9]*' >/dev/null 2>&1 &&
  ! command -v cargo-semver-checks >/dev/null 2>&1; then
  cargo install --locked --quiet cargo-semver-checks
fi

if command -v rustup >/dev/null 2>&1; then
  cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
  cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
fi
