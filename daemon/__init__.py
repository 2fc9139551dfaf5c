"""tether.daemon"""
