"""What a C# program is compiled and run with beside its source, so that Mono judges it as upstream's .NET does.

Upstream builds C# with ``dotnet run``: a Debug build, where a failing ``Debug.Assert`` (or ``Trace.Assert``,
or ``Debug.Fail``) ends the process. Mono's default trace listener lets the program go on, writing the
failure nowhere (unless ``MONO_TRACE_LISTENER`` names a place), so that every test of a MultiPL-E program,
each such an assert, would pass. The listener here takes its place (the program's configuration file,
``main.exe.config``, which Mono reads beside ``main.exe``, says so): it writes the failure and the stack on
stderr and ends the program with exit code 1, after what it printed.
"""

from __future__ import annotations

# Compiled into main.exe with the program: the configuration names the listener by its assembly, "main".
LISTENER_SOURCE = "codegym_assert.cs"

_LISTENER = """\
namespace CodegymSandbox {
    public sealed class FailingAssertListener : System.Diagnostics.DefaultTraceListener {
        public override void Fail(string message) { Fail(message, null); }

        public override void Fail(string message, string detail) {
            System.Console.Out.Flush();
            System.Console.Error.WriteLine("Assertion failed.");
            foreach (string line in new string[] { message, detail }) {
                if (!string.IsNullOrEmpty(line)) System.Console.Error.WriteLine(line);
            }
            System.Console.Error.Write(new System.Diagnostics.StackTrace(2, true));
            System.Environment.Exit(1);
        }
    }
}
"""

_CONFIG = """\
<?xml version="1.0" encoding="utf-8"?>
<configuration>
  <system.diagnostics>
    <trace>
      <listeners>
        <remove name="Default"/>
        <add name="Default" type="CodegymSandbox.FailingAssertListener, main"/>
      </listeners>
    </trace>
  </system.diagnostics>
</configuration>
"""

SUPPORT = {LISTENER_SOURCE: _LISTENER, "main.exe.config": _CONFIG}
