"""Embedded datasets shipped with crabrec (Amazon-2014 Office, LC-Rec layout; see office/PROVENANCE.md)."""
