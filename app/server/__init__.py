"""app/server"""
