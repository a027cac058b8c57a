"""How the tests start ``java`` and ``javac`` for the stock client's programs.

C1 only and the serial collector: a JVM that lives seconds spends most of its CPU in the
optimising compiler and the parallel collector's threads, and the suite shares two cores
(javac of tests/interop/java: 6.4 s of CPU -> 2.9 s).  The benchmarks run their JVMs and
the stock broker with the JVM's defaults.
"""

# Imported here, where tests/conftest.py first imports, so the run's shared directory is made
# before the xdist workers start and they inherit its name.
from tests import jvmcds

JAVA = ("java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
JAVAC = ("javac", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-nowarn")
# run.sh's IMQ_JVM_ARGS for a stock broker in a test: its own heap settings, the above, and
# the run's class-data archive of the stock broker once it is made (tests/jvmcds.py).
STOCK_BROKER_JVM = (
    "-Xms192m -Xmx192m -Xss256k -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
    + jvmcds.argfile("broker")
)
# Spark's JVMs (a driver, Spark's launcher, the standalone master, worker and executors):
# the above, and no bytecode verification of the classes from Spark's jars (the JDK's own
# are not verified anyway).  A Spark start loads thousands of classes from its jars, and
# verifying them is a good part of its CPU: a local session and a tiny job took 9.1-12.8 s
# of CPU with C1 alone, 7.8-8.1 s so (three runs each, load ~10).
SPARK_JVM = (*JAVA[1:], "-XX:+UnlockDiagnosticVMOptions", "-XX:-BytecodeVerificationRemote")
# PYSPARK_SUBMIT_ARGS for a Spark driver a test starts (the rollup tests' local Spark).
SPARK_DRIVER_JVM = f"--driver-java-options '{' '.join(SPARK_JVM)}' pyspark-shell"
# SPARK_LAUNCHER_OPTS: spark-submit and spark-class first run a JVM of Spark's launcher
# library that only works out the real JVM's command line.
SPARK_LAUNCHER_JVM = " ".join(SPARK_JVM)
