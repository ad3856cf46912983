#!/bin/sh
# The product's C++ files that `make format`, `make format-check`, `make lint` and the ctest
# format_check cover: every tracked .cpp/.hpp under services/, shared/, plugins/ and cli/
# (tests, benchmarks and generated code are not product files). One path per line.
set -eu
cd "$(dirname "$0")/.."
git ls-files 'services/*.cpp' 'services/*.hpp' 'shared/*.cpp' 'shared/*.hpp' 'plugins/*.cpp' 'plugins/*.hpp' \
  'cli/*.cpp' 'cli/*.hpp'
