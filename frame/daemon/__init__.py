"""frame.daemon"""
