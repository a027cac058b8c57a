"""Administered objects (OpenMQ's imqobjmgr): connection factories and destinations kept
in the shared database and published to JNDI object stores (LDAP, file system)."""
