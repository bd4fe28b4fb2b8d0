// planner::store: everything, for callers that want the whole API in one include.
#pragma once

#include "planner/store/comparison.hpp"
#include "planner/store/database.hpp"
#include "planner/store/export.hpp"
#include "planner/store/hash.hpp"
#include "planner/store/measurements.hpp"
#include "planner/store/metrics.hpp"
#include "planner/store/plans.hpp"
#include "planner/store/predictions.hpp"
#include "planner/store/profiles.hpp"
#include "planner/store/records.hpp"
#include "planner/store/runs.hpp"
#include "planner/store/sweeps.hpp"
