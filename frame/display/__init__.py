"""frame.display"""
