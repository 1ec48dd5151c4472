"""The record and what reads it after the session: the transcript, its integrity, replay, audit and the audit's page."""
