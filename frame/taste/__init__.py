"""frame.taste"""
