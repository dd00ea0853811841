#include "trace/trace-block_drbd.h"
