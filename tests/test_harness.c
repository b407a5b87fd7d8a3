/* The harness itself: a test that made no checks fails, one whose checks
 * all passed succeeds, one with a failed check fails. */
#include "harness.h"

int main(void) {
    int none = test_finish(); /* nothing checked yet */
    CHECK(none == 1);
    int passed = test_finish(); /* one passing check */
    CHECK(passed == 0);
    test_failures++;
    int failed = test_finish();
    test_failures--;
    CHECK(failed == 1);
    return test_finish();
}
