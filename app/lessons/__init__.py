"""app/lessons"""
