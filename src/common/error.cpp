// (error.h is header-only; this unit keeps specula_common a real library.)
#include "common/error.h"
