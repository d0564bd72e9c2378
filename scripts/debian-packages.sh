# Sourced by scripts that need Debian packages (scripts/differential.sh, fuzz/run-fuzzers.sh):
#
#   install_missing_packages PACKAGE...
#
# installs the packages that are not installed, with apt-get as root (updating the lists once if
# the first try fails); as another user it prints the command to run as root and returns 1.
# Returns 0 when every package is there. The same rule as scripts/install-deps.sh.
install_missing_packages() {
  local missing=() package
  for package in "$@"; do
    [[ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)" == "install ok installed" ]] ||
      missing+=("$package")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ "$(id -u)" -ne 0 ]]; then
    echo "missing Debian packages: ${missing[*]}; run as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    return 1
  fi
  echo "installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
}
