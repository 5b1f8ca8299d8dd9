// Moved to ktune_internal/c_api.hpp (the C API's shared helpers, also used by autotune/c_api_warmup.cpp).
#pragma once

#include "ktune_internal/c_api.hpp"
