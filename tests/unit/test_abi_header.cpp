// test_abi_header.cpp — the same checks as test_abi_header.c, compiled as C++
// (-Wall -Wextra -pedantic -Werror): the ABI headers must be usable from C++.
#include "test_abi_header.c"
