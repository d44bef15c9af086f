"""Stdin programs in other languages than Python (C, C++, JavaScript, bash), each task's right one and a wrong one."""

from __future__ import annotations

C_ADD = (
    '#include <stdio.h>\nint main(void) { long a, b; scanf("%ld %ld", &a, &b); printf("%ld\\n", a + b); return 0; }\n',
    '#include <stdio.h>\nint main(void) { long a, b; scanf("%ld %ld", &a, &b); printf("%ld\\n", a + b + 1); }\n',
)
CPP_ADD = (
    "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n",
    "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a - b << std::endl; }\n",
)
JS_ADD = (
    "const [a, b] = require('fs').readFileSync(0, 'utf8').split(/\\s+/).map(Number);\nconsole.log(a + b);\n",
    "const [a, b] = require('fs').readFileSync(0, 'utf8').split(/\\s+/).map(Number);\nconsole.log(String(a) + b);\n",
)
SH_ADD = ("read a\nread b\necho $((a + b))\n", "read a\nread b\necho $((a * b))\n")

C_GCD = (
    """#include <stdio.h>
long g(long a, long b) { return b ? g(b, a % b) : a; }
int main(void) { long a, b; scanf("%ld %ld", &a, &b); printf("%ld\\n", g(a, b)); return 0; }
""",
    """#include <stdio.h>
int main(void) { long a, b; scanf("%ld %ld", &a, &b); printf("%ld\\n", a < b ? a : b); return 0; }
""",
)
CPP_GCD = (
    """#include <iostream>
#include <numeric>
int main() { long a, b; std::cin >> a >> b; std::cout << std::gcd(a, b) << '\\n'; }
""",
    "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a * b << '\\n'; }\n",
)
JS_GCD = (
    """const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);
const g = (x, y) => (y ? g(y, x % y) : x);
console.log(g(a, b));
""",
    """const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);
console.log(Math.min(a, b));
""",
)

C_REV = (
    """#include <stdio.h>
#include <string.h>
int main(void) {
    char s[4096], *w[2048];
    int n = 0;
    if (!fgets(s, sizeof s, stdin)) s[0] = 0;
    for (char *t = strtok(s, " \\n"); t; t = strtok(0, " \\n")) w[n++] = t;
    for (int i = n - 1; i >= 0; i--) printf(i ? "%s " : "%s", w[i]);
    printf("\\n");
    return 0;
}
""",
    """#include <stdio.h>
int main(void) { char s[4096]; if (!fgets(s, sizeof s, stdin)) s[0] = 0; printf("%s", s); return 0; }
""",
)
JS_REV = (
    "const s = require('fs').readFileSync(0, 'utf8').trim();\nconsole.log(s.split(/\\s+/).reverse().join(' '));\n",
    "const s = require('fs').readFileSync(0, 'utf8').trim();\nconsole.log(s.split('').reverse().join(''));\n",
)
SH_REV = (
    'read -a w\nout=()\nfor ((i=${#w[@]}-1; i>=0; i--)); do out+=("${w[i]}"); done\necho "${out[*]}"\n',
    'read -a w\necho "${w[*]}"\n',
)

C_FIB = (
    """#include <stdio.h>
int main(void) { int n; long a = 0, b = 1, t; scanf("%d", &n); while (n--) { t = a + b; a = b; b = t; }
    printf("%ld\\n", a); return 0; }
""",
    """#include <stdio.h>
int main(void) { int n; long a = 1, b = 1, t; scanf("%d", &n); while (n--) { t = a + b; a = b; b = t; }
    printf("%ld\\n", a); return 0; }
""",
)
SH_FIB = (
    "read n\na=0; b=1\nfor ((i=0; i<n; i++)); do t=$((a+b)); a=$b; b=$t; done\necho $a\n",
    "read n\na=0; b=1\nfor ((i=0; i<=n; i++)); do t=$((a+b)); a=$b; b=$t; done\necho $a\n",
)

C_MAX = (
    """#include <stdio.h>
int main(void) {
    long x, best = -1L << 60, cur = 0;
    while (scanf("%ld", &x) == 1) { cur = cur > 0 ? cur + x : x; if (cur > best) best = cur; }
    printf("%ld\\n", best);
    return 0;
}
""",
    """#include <stdio.h>
int main(void) { long x, s = 0; while (scanf("%ld", &x) == 1) s += x; printf("%ld\\n", s); return 0; }
""",
)
JS_VOW = (
    "const s = require('fs').readFileSync(0, 'utf8').replace(/\\n$/, '');\n"
    "console.log((s.match(/[aeiouAEIOU]/g) || []).length);\n",
    "const s = require('fs').readFileSync(0, 'utf8').replace(/\\n$/, '');\n"
    "console.log((s.match(/[aeiou]/g) || []).length + 1);\n",
)
