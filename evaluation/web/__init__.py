"""The staff dashboard and server-rendered reports, reached from the admin."""
