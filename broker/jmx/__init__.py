"""JMX over RMI (issue 39): OpenMQ's MBeans reached with the JDK's JMX remote client."""
